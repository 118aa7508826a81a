package sqlite

// RemoveBenchFile lets TestMain, in package sqlite_test, remove the
// benchmarks' database after the run.
var RemoveBenchFile = removeBenchFile
