package worker

import (
	"strconv"

	"github.com/walkeeper/walkeeper/contract"
)

// maxEchoedText bounds client-supplied text (a path, a query value, a header, a member name)
// quoted in an error message or a log line: a 60 KiB URL must not become a 60 KiB log line.
const maxEchoedText = 256

// clipText is s cut to maxEchoedText bytes at a character boundary, marked with its length
// when it was cut.
func clipText(s string) string {
	if len(s) <= maxEchoedText {
		return s
	}
	return contract.Clip(s, maxEchoedText) + "[clipped, " + strconv.Itoa(len(s)) + " bytes]"
}
