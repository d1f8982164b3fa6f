package redigo

// Dial is dial, the opener of client=redigo URLs, for the tests.
var Dial = dial
