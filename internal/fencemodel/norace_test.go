//go:build !race

package fencemodel

const raceEnabled = false
