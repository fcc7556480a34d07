//go:build !wasip1

package sdk

// The canonical ABI's memory primitives outside wasm, for `go test`: a
// byte slice stands in for linear memory (address 0 is never handed out),
// so the lifting and lowering code of abi.go runs natively against
// layouts the tests write.

import (
	"encoding/binary"
	"math"
	"strings"
	"unicode/utf8"
)

var memory = make([]byte, 8, 1<<16)

func load8(a uint32) uint8       { return memory[a] }
func load32(a uint32) uint32     { return binary.LittleEndian.Uint32(memory[a:]) }
func load64(a uint32) uint64     { return binary.LittleEndian.Uint64(memory[a:]) }
func loadF64(a uint32) float64   { return math.Float64frombits(load64(a)) }
func store8(a uint32, v uint8)   { memory[a] = v }
func store32(a uint32, v uint32) { binary.LittleEndian.PutUint32(memory[a:], v) }
func store64(a uint32, v uint64) { binary.LittleEndian.PutUint64(memory[a:], v) }

func loadString(p, n uint32) string { return string(memory[p : p+n]) }

func loadU32s(p, n uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = load32(p + uint32(i)*4)
	}
	return out
}

func loadS64s(p, n uint32) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(load64(p + uint32(i)*8))
	}
	return out
}

// memAlloc appends size zeroed bytes at the next multiple of align.
func memAlloc(size, align uint32) uint32 {
	if align == 0 {
		align = 1
	}
	off := (uint32(len(memory)) + align - 1) &^ (align - 1)
	memory = append(memory, make([]byte, off+size-uint32(len(memory)))...)
	return off
}

func cabiRealloc(old, oldSize, align, newSize uint32) uint32 {
	if old != 0 && newSize <= oldSize {
		return old
	}
	a := memAlloc(newSize, align)
	copy(memory[a:a+oldSize], memory[old:old+oldSize])
	return a
}

func releaseArgs() {}

var retArea = memAlloc(64, 8)

func resultArea() uint32 { return retArea }

func resultAlloc(size, align uint32) uint32 { return memAlloc(size, align) }

func lowerString(s string) (uint32, uint32) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	a := memAlloc(uint32(len(s)), 1)
	copy(memory[a:], s)
	return a, uint32(len(s))
}

func releaseResults() {}

// Natively the Go runtime collects as usual.
func collectIfDue() {}
