package securitytest

import "fmt"

func fmtErr(format string, err error) string { return fmt.Sprintf(format, err) }
