// Package workflows holds walkeeper's deterministic orchestration against package contract:
// the store is reached only through activities, called by name, so this package imports
// neither store/ nor activities/ and does no I/O from workflow code.
package workflows
