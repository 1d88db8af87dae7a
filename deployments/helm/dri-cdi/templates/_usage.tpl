{{- /*
Per-container GPU usage (docs/usage.md), for the agent and the DRA
plugin containers. Each helper renders nothing unless usage.enabled, so
that without it the manifests do not change.
*/ -}}

{{- define "dri-cdi.usageArgs" -}}
{{- if .Values.usage.enabled }}
- --usage=true
- --usage-interval={{ .Values.usage.interval }}
- --usage-idle-after={{ .Values.usage.idleAfter }}
- --proc-root=/host/proc
- --usage-bundle-dir={{ .Values.usage.bundleDir }}
{{- end }}
{{- end -}}

{{- define "dri-cdi.usageMounts" -}}
{{- if .Values.usage.enabled }}
- name: host-proc
  mountPath: /host/proc
  readOnly: true
- name: runtime-bundles
  mountPath: {{ .Values.usage.bundleDir }}
  readOnly: true
{{- end }}
{{- end -}}

{{- define "dri-cdi.usageVolumes" -}}
{{- if .Values.usage.enabled }}
- name: host-proc
  hostPath:
    path: /proc
    type: Directory
- name: runtime-bundles
  hostPath:
    path: {{ .Values.usage.bundleDir }}
    type: DirectoryOrCreate
{{- end }}
{{- end -}}

{{- /*
The security context of the container that scans: the common one, plus
CAP_SYS_PTRACE (reading other processes' fd links and fdinfo is a ptrace
read check) and, where asked, no AppArmor confinement (containerd's
default profile allows ptrace only within itself).
*/ -}}
{{- define "dri-cdi.scannerSecurityContext" -}}
{{- if .Values.usage.enabled }}
privileged: false
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop:
  - ALL
  add:
  - SYS_PTRACE
seccompProfile:
  type: RuntimeDefault
{{- if .Values.usage.appArmorUnconfined }}
appArmorProfile:
  type: Unconfined
{{- end }}
{{- else }}
{{- include "dri-cdi.containerSecurityContext" . }}
{{- end }}
{{- end -}}
