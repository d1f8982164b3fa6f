package main

import (
	"context"
	"errors"
	"io"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("bench: not yet")
}

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("inspect: not yet")
}
