// Package reliability is walkeeper's fault suite: an oracle of acknowledged
// appends, fault-injecting bucket wrappers (objstore.Faults), a child-process harness that
// re-executes the test binary so crashes are real SIGKILLs of real processes, and the tests
// that combine them: storage faults under a mixed load, commit races across processes,
// the merge crash matrix, worker and Temporal restarts, damaged objects. docs/RELIABILITY.md
// says what each test proves, how to run the long versions, and what the recorded runs found.
//
// Nothing here is used by the product; it depends only on the public API of store/ (plus
// worker/ and the Temporal test server in the process-level tests).
package reliability
