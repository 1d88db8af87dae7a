package nri

// Watching is watching, for the tests of package nri_test.
var Watching = watching
