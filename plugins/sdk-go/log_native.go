//go:build !wasip1

package sdk

import (
	"fmt"
	"os"
	"strings"
)

// Log writes a message to the scheduler's log, attributed to this plugin
// (natively, in unit tests, to stderr).
func Log(level LogLevel, message string) {
	fmt.Fprintf(os.Stderr, "[%s] %s\n", level, message)
}

// Natively the module exports nothing: the exports are not checked.
func builtExports() (Point, bool) { return 0, false }

// DescribeEnv, set to 1, makes Register print the points the plugin
// implements and exit: cmd/build-plugin runs the plugin natively that way
// to choose the component's exports.
const DescribeEnv = "WASMSCHED_SDK_DESCRIBE"

// DescribePrefix starts the line Register prints in describe mode.
const DescribePrefix = "wasmsched-sdk-points:"

func registeredHook(points Point) {
	if os.Getenv(DescribeEnv) == "1" {
		fmt.Println(strings.TrimSpace(DescribePrefix + " " + strings.Join(points.Names(), " ")))
		os.Exit(0)
	}
}
