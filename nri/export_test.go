package nri

// Watching is watching, for the tests of package nri_test.
var Watching = watching

// WithHostStat returns o with the plugin's stat of host nodes replaced,
// for tests of Run.
func WithHostStat(o Options, stat HostStat) Options {
	o.hostStat = stat
	return o
}
