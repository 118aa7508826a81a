package idem

// HeartbeatLoops returns how many renewal loops have started in this
// process.
func HeartbeatLoops() int64 { return loopsStarted.Load() }
