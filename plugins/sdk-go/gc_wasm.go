//go:build wasip1

package sdk

// Garbage collection at safe points only. The host calls cabi_realloc
// while it lowers a call's arguments and the post-return functions after
// it lifted the results; in both the component model forbids calling an
// import ("cannot leave component instance"). A Go allocation there can
// start a collection, and a collection reads the clock, an import through
// the WASI adapter: the instance traps. So automatic collection is off,
// and the SDK collects at the end of exported calls, where imports are
// allowed, by GOGC=100's rule: when the heap allocated since the last
// collection reaches the heap live after it (at least 4 MiB). Reading the
// heap's numbers stops the world, so it is done every 32 calls, and at
// once after a call whose arguments and results took 1 MiB or more (a
// full sync). Memory profiling, whose sampling runs inside allocations, is
// off too.

import (
	"runtime"
	_ "unsafe" // go:linkname
)

// setGCPercent is runtime/debug.SetGCPercent's implementation in the
// runtime: importing runtime/debug would add fmt and os to every component
// (400 KB).
//
//go:linkname setGCPercent runtime/debug.setGCPercent
func setGCPercent(int32) int32

const (
	minCollectBytes = 4 << 20
	checkEvery      = 32
	checkAfterBytes = 1 << 20
)

var (
	calls                uint32
	abiBytes             uint32 // argument and result bytes since the last check
	allocsAtGC, liveAtGC uint64
	memStats             runtime.MemStats
)

func init() {
	setGCPercent(-1)
	runtime.MemProfileRate = 0
}

// collectIfDue runs at the end of every exported function.
func collectIfDue() {
	calls++
	if calls%checkEvery != 0 && abiBytes < checkAfterBytes {
		return
	}
	abiBytes = 0
	runtime.ReadMemStats(&memStats)
	if memStats.TotalAlloc-allocsAtGC < max(liveAtGC, minCollectBytes) {
		return
	}
	runtime.GC()
	runtime.ReadMemStats(&memStats)
	allocsAtGC, liveAtGC = memStats.TotalAlloc, memStats.HeapAlloc
}
