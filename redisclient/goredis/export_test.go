package goredis

// Dial is dial, the opener of client=goredis URLs, for the tests.
var Dial = dial
