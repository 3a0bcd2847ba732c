// Package integration holds walkeeper's end-to-end tests against a real Temporal server
// (see main_test.go); it has no non-test code.
package integration
