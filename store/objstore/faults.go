package objstore

// Operation names passed to Faults.Before and Faults.After. They are stable so reliability
// tests can target one kind of call (for example only put_if_absent on manifests).
const (
	OpGet         = "get"
	OpPut         = "put" // Put and PutFrom
	OpPutIfAbsent = "put_if_absent"
	OpExists      = "exists"
	OpDelete      = "delete"
	OpList        = "list"      // key = the prefix
	OpListDirs    = "list_dirs" // key = the normalised prefix
)

// Faults is the fault-injection hook of reliability tests, safe for concurrent use: Before
// runs first and a non-nil error is returned without performing the operation; After gets
// the performed operation's result and returns what the caller sees, so an error after a
// successful write models "landed but told failed". op is one of the Op* constants.
type Faults interface {
	Before(op, key string) error
	After(op, key string, err error) error
}

// FaultFuncs adapts two optional functions to Faults; a nil field passes the call through.
type FaultFuncs struct {
	BeforeFunc func(op, key string) error
	AfterFunc  func(op, key string, err error) error
}

// Before implements Faults.
func (f FaultFuncs) Before(op, key string) error {
	if f.BeforeFunc == nil {
		return nil
	}
	return f.BeforeFunc(op, key)
}

// After implements Faults.
func (f FaultFuncs) After(op, key string, err error) error {
	if f.AfterFunc == nil {
		return err
	}
	return f.AfterFunc(op, key, err)
}
