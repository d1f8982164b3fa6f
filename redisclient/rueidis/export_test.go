package rueidis

// Dial is dial, the opener of client=rueidis URLs, for the tests.
var Dial = dial
