//go:build wasip1

package sdk

// The canonical ABI's memory primitives over the module's own linear
// memory: an address is an offset into it, and Go's heap lives there too.
// Go's garbage collector does not move objects, so memory stays where it
// is while something references it: argument memory is referenced from
// the argument arena until the call has lifted (copied) its arguments,
// result memory from resultKeep until the call's post-return.

import (
	"strings"
	"unicode/utf8"
	"unsafe"
)

func at(a uint32) unsafe.Pointer { return unsafe.Add(unsafe.Pointer(nil), a) }

func addr(p unsafe.Pointer) uint32 { return uint32(uintptr(p)) }

func load8(a uint32) uint8       { return *(*uint8)(at(a)) }
func load32(a uint32) uint32     { return *(*uint32)(at(a)) }
func load64(a uint32) uint64     { return *(*uint64)(at(a)) }
func loadF64(a uint32) float64   { return *(*float64)(at(a)) }
func store8(a uint32, v uint8)   { *(*uint8)(at(a)) = v }
func store32(a uint32, v uint32) { *(*uint32)(at(a)) = v }
func store64(a uint32, v uint64) { *(*uint64)(at(a)) = v }

// loadString copies n bytes at p into a Go string.
func loadString(p, n uint32) string {
	if n == 0 {
		return ""
	}
	return string(unsafe.Slice((*byte)(at(p)), n))
}

func loadU32s(p, n uint32) []uint32 {
	out := make([]uint32, n)
	if n > 0 {
		copy(out, unsafe.Slice((*uint32)(at(p)), n))
	}
	return out
}

func loadS64s(p, n uint32) []int64 {
	out := make([]int64, n)
	if n > 0 {
		copy(out, unsafe.Slice((*int64)(at(p)), n))
	}
	return out
}

// The argument arena: cabi_realloc carves the host's argument memory out
// of 64 KiB chunks (8-aligned, pointer-free so the collector does not scan
// them). A call lifts (copies) its arguments and then releases the arena:
// the last chunk is reused, the others are let go.
const argChunkBytes = 64 << 10

var (
	argChunk []uint64
	argUsed  uint32
	argKeep  [][]uint64
)

//go:wasmexport cabi_realloc
func cabiRealloc(old, oldSize, align, newSize uint32) uint32 {
	if old != 0 && newSize <= oldSize {
		return old
	}
	a := argAlloc(newSize, align)
	if old != 0 && oldSize > 0 {
		copy(unsafe.Slice((*byte)(at(a)), oldSize), unsafe.Slice((*byte)(at(old)), oldSize))
	}
	return a
}

func argAlloc(size, align uint32) uint32 {
	abiBytes += size
	if align == 0 {
		align = 1
	}
	if size > argChunkBytes/4 {
		block := make([]uint64, (size+7)/8)
		argKeep = append(argKeep, block)
		return addr(unsafe.Pointer(&block[0]))
	}
	if argChunk == nil {
		argChunk = make([]uint64, argChunkBytes/8)
	}
	off := (argUsed + align - 1) &^ (align - 1)
	if off+size > argChunkBytes {
		argKeep = append(argKeep, argChunk)
		argChunk = make([]uint64, argChunkBytes/8)
		off = 0
	}
	argUsed = off + size
	return addr(unsafe.Pointer(&argChunk[0])) + off
}

// The WASI 0.1 adapter (which turns the Go runtime's WASI 0.1 imports
// into WASI 0.2) allocates its state once, on the first WASI call the Go
// runtime makes, through the main module's `cabi_realloc_adapter` when it
// has one. That call arrives while Go code is inside the WASI call, so it
// must not enter the Go runtime (allocate, grow the stack, yield): it is
// a nosplit bump allocator over a static buffer, which it never frees.
var (
	adapterHeap [adapterHeapBytes]byte
	adapterUsed uint32
)

const adapterHeapBytes = 128 << 10

//go:wasmexport cabi_realloc_adapter
//go:nosplit
func cabiReallocAdapter(old, oldSize, align, newSize uint32) uint32 {
	if old != 0 && newSize <= oldSize {
		return old
	}
	if align == 0 {
		align = 1
	}
	base := uint32(uintptr(unsafe.Pointer(&adapterHeap)))
	start := (base + adapterUsed + align - 1) &^ (align - 1)
	if start+newSize > base+adapterHeapBytes {
		return 0 // the adapter traps: its state does not fit
	}
	for i := uint32(0); i < oldSize && old != 0; i++ {
		*(*byte)(at(start + i)) = *(*byte)(at(old + i))
	}
	adapterUsed = start + newSize - base
	return start
}

func releaseArgs() {
	clear(argKeep)
	argKeep = argKeep[:0]
	argUsed = 0
}

// Results: a static area for the flat results, and the lists and strings
// they point to, kept referenced until post-return.
var (
	retArea     [8]uint64
	resultKeep  [][]uint64
	resultTexts []string
)

func resultArea() uint32 { return addr(unsafe.Pointer(&retArea)) }

func resultAlloc(size, align uint32) uint32 {
	if size == 0 {
		return align
	}
	abiBytes += size
	block := make([]uint64, (size+7)/8)
	resultKeep = append(resultKeep, block)
	return addr(unsafe.Pointer(&block[0]))
}

// lowerString gives the host s's bytes in place (invalid UTF-8, which the
// host would refuse, replaced).
func lowerString(s string) (uint32, uint32) {
	if len(s) == 0 {
		return 1, 0
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	resultTexts = append(resultTexts, s)
	return addr(unsafe.Pointer(unsafe.StringData(s))), uint32(len(s))
}

func releaseResults() {
	clear(resultKeep)
	resultKeep = resultKeep[:0]
	clear(resultTexts)
	resultTexts = resultTexts[:0]
}
