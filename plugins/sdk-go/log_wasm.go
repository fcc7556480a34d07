//go:build wasip1

package sdk

import (
	"runtime"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Log writes a message to the scheduler's log, attributed to this plugin
// (natively, in unit tests, to stderr).
func Log(level LogLevel, message string) {
	if !utf8.ValidString(message) {
		message = strings.ToValidUTF8(message, "\uFFFD")
	}
	hostLog(uint32(level), unsafe.Pointer(unsafe.StringData(message)), uint32(len(message)))
	runtime.KeepAlive(message)
}

// builtPoints are the optional interfaces this module exports: each
// export_*_gen.go that the build's tags select adds its own.
var builtPoints Point

func builtExports() (Point, bool) { return builtPoints, true }

func registeredHook(Point) {}
