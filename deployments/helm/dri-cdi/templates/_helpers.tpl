{{/* Name of every object: the release name, with "-dri-cdi" unless it already contains it. */}}
{{- define "dri-cdi.fullname" -}}
{{- if contains "dri-cdi" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-dri-cdi" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "dri-cdi.selectorLabels" -}}
app.kubernetes.io/name: dri-cdi
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "dri-cdi.labels" -}}
{{ include "dri-cdi.selectorLabels" . }}
app.kubernetes.io/part-of: dri-cdi
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "dri-cdi.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The container security context both containers share. */}}
{{- define "dri-cdi.containerSecurityContext" -}}
privileged: false
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop:
  - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "dri-cdi.probes" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: {{ .port }}
  initialDelaySeconds: 5
  periodSeconds: 10
  timeoutSeconds: 2
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: {{ .port }}
  periodSeconds: 5
  timeoutSeconds: 2
  failureThreshold: 3
{{- end -}}
