package goredis

// Dial is dial, the opener of client=goredis URLs, for the tests.
var Dial = dial

// WorkerIdle is workerIdle: a worker exits between it and twice it after
// its last command.
const WorkerIdle = workerIdle
