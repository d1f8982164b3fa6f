package compare

//go:generate go run ../gendocs -doc ../../../../docs/guarantees.md
