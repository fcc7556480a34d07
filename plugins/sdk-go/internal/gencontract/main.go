// Command gencontract writes the parts of the Go SDK that depend on the
// contract's text, from the contract it implements: 0.2.0, kept in
// wit/history/0.2.0/plugin.wit (the current contract, wit/plugin.wit, adds
// device ranking, which this SDK does not offer yet; the host runs 0.2
// components unchanged):
//
//   - contract_gen.go: ContractVersion, from the `package
//     wasmsched:plugin@X.Y.Z;` line;
//   - export_*_gen.go: the `//go:wasmexport` functions, named after that
//     version (`wasmsched:plugin/filter@X.Y.Z#filter`), one file per
//     contract interface, each behind a build tag so that a component
//     exports only what its plugin implements, and the host import;
//   - cmd/build-plugin/contract.wit: the contract, embedded by the build
//     command into each component's world.
//
// It also checks that the contract still declares what the hand-written
// canonical-ABI glue (abi.go) was written for: every function signature
// below verbatim, and the declarations' digest (comments and blank lines
// left out). A change there fails with a message saying what to update.
//
// Run from plugins/sdk-go: `go generate ./...` (or `go run
// ./internal/gencontract`); `go test ./...` fails when the files are not
// current.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// declarationsDigest is the sha256 of wit/plugin.wit's declarations
// (comment and blank lines removed, lines trimmed) that abi.go's layouts
// were written against.
const declarationsDigest = "94f87bb98f1b149dbd1e38d82edef2afbdfcd62be1e05439e7d1696f0842ba17"

type function struct {
	wit       string // name in the contract
	signature string // its declaration, verbatim
	goName    string // the Go function exported
	params    string // core wasm parameters
	call      string // the body: a call into abi.go
	result    bool   // returns a result area (then it has a post-return)
}

type iface struct {
	name  string // WIT interface
	tag   string // build tag ("" for lifecycle, always exported)
	point string // sdk.Point constant
	funcs []function
}

var interfaces = []iface{
	{name: "lifecycle", funcs: []function{
		{"contract-version", "contract-version: func() -> string;", "exportContractVersion", "", "abiContractVersion()", true},
		{"init", "init: func(args: string) -> result<_, string>;", "exportInit", "p, n uint32", "abiInit(p, n)", true},
		{"apply", "apply: func(deltas: list<delta>);", "exportApply", "p, n uint32", "abiApply(p, n)", false},
		{"cycle-start", "cycle-start: func(pod: pod) -> result<cycle-plan, string>;", "exportCycleStart", "a uint32", "abiCycleStart(a)", true},
	}},
	{name: "filter", tag: "wasmsched_filter", point: "PointFilter", funcs: []function{
		{"filter", "filter: func(nodes: list<node-index>) -> list<option<rejection>>;", "exportFilter", "p, n uint32", "abiFilter(p, n)", true},
	}},
	{name: "score", tag: "wasmsched_score", point: "PointScore", funcs: []function{
		{"score", "score: func(nodes: list<node-index>) -> result<list<s64>, string>;", "exportScore", "p, n uint32", "abiScore(p, n)", true},
	}},
	{name: "normalize-score", tag: "wasmsched_normalize_score", point: "PointNormalizeScore", funcs: []function{
		{"normalize-score", "normalize-score: func(nodes: list<node-index>, scores: list<s64>) -> result<list<s64>, string>;", "exportNormalizeScore", "np, nn, sp, sn uint32", "abiNormalizeScore(np, nn, sp, sn)", true},
	}},
	{name: "deletion-cost", tag: "wasmsched_deletion_cost", point: "PointDeletionCost", funcs: []function{
		{"deletion-cost", "deletion-cost: func(pod: pod-status, metrics: list<tuple<string, f64>>) -> result<option<s32>, string>;", "exportDeletionCost", "a uint32", "abiDeletionCost(a)", true},
	}},
	{name: "interests", tag: "wasmsched_interests", point: "PointInterests", funcs: []function{
		{"interests", "interests: func() -> key-interests;", "exportInterests", "", "abiInterests()", true},
	}},
	{name: "post-filter", tag: "wasmsched_post_filter", point: "PointPostFilter", funcs: []function{
		{"post-filter", "post-filter: func(candidates: list<candidate>) -> result<preemption-advice, string>;", "exportPostFilter", "p, n uint32", "abiPostFilter(p, n)", true},
	}},
	{name: "reserve", tag: "wasmsched_reserve", point: "PointReserve", funcs: []function{
		{"reserve", "reserve: func(node: node-index) -> result<_, string>;", "exportReserve", "node uint32", "abiReserve(node)", true},
		{"unreserve", "unreserve: func(pod-uid: string, node: node-index);", "exportUnreserve", "p, n, node uint32", "abiUnreserve(p, n, node)", false},
	}},
	{name: "permit", tag: "wasmsched_permit", point: "PointPermit", funcs: []function{
		{"permit", "permit: func(node: node-index) -> permit-result;", "exportPermit", "node uint32", "abiPermit(node)", true},
	}},
	{name: "pre-bind", tag: "wasmsched_pre_bind", point: "PointPreBind", funcs: []function{
		{"pre-bind", "pre-bind: func(node: node-index) -> result<pod-patch, string>;", "exportPreBind", "node uint32", "abiPreBind(node)", true},
	}},
}

// hostLog is the one import.
const hostLogSignature = "log: func(level: log-level, message: string);"

var packageLine = regexp.MustCompile(`(?m)^package wasmsched:plugin@([0-9]+\.[0-9]+\.[0-9]+);$`)

// Version is the contract's version, from its package line.
func Version(wit string) (string, error) {
	m := packageLine.FindStringSubmatch(wit)
	if m == nil {
		return "", errors.New("no `package wasmsched:plugin@X.Y.Z;` line")
	}
	return m[1], nil
}

// Digest is the sha256 of the contract's declarations: every line
// trimmed, without comment lines and blank lines.
func Digest(wit string) string {
	var b strings.Builder
	for _, line := range strings.Split(wit, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

const header = "// Code generated by internal/gencontract from wit/history/0.2.0/plugin.wit. DO NOT EDIT.\n\n"

// Generate returns the generated files, by path relative to plugins/sdk-go.
func Generate(wit string) (map[string][]byte, error) {
	version, err := Version(wit)
	if err != nil {
		return nil, err
	}
	for _, sig := range append(signatures(), hostLogSignature) {
		if !strings.Contains(wit, sig) {
			return nil, fmt.Errorf("the contract no longer declares `%s`: update abi.go and the table in internal/gencontract/main.go", sig)
		}
	}
	if d := Digest(wit); d != declarationsDigest {
		return nil, fmt.Errorf("the contract's declarations changed (digest %s, abi.go was written for %s): check the layouts in abi.go against wit/plugin.wit, then set declarationsDigest in internal/gencontract/main.go", d, declarationsDigest)
	}
	files := map[string][]byte{}
	add := func(path, src string) error {
		out, err := format.Source([]byte(src))
		if err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		files[path] = out
		return nil
	}
	err = add("contract_gen.go", header+"package sdk\n\n"+
		"// ContractVersion is the version of the contract (wit/plugin.wit) this SDK\n"+
		"// implements; `lifecycle.contract-version` returns it.\n"+
		"const ContractVersion = \""+version+"\"\n")
	if err != nil {
		return nil, err
	}
	for _, in := range interfaces {
		var b strings.Builder
		b.WriteString(header)
		if in.tag == "" {
			b.WriteString("//go:build wasip1\n\npackage sdk\n\n")
			b.WriteString("import \"unsafe\"\n\n")
			fmt.Fprintf(&b, "//go:wasmimport wasmsched:plugin/host@%s log\n//go:noescape\n", version)
			b.WriteString("func hostLog(level uint32, message unsafe.Pointer, length uint32)\n\n")
			b.WriteString("// The contract's lifecycle, exported by every plugin; the memory\n// allocator the host lowers arguments with is cabi_realloc (mem_wasm.go).\n\n")
		} else {
			fmt.Fprintf(&b, "//go:build wasip1 && %s\n\npackage sdk\n\n", in.tag)
			fmt.Fprintf(&b, "// The contract's %s interface, exported when the plugin implements it\n// (cmd/build-plugin sets the tag %s).\n\n", in.name, in.tag)
			fmt.Fprintf(&b, "func init() { builtPoints |= %s }\n\n", in.point)
		}
		for _, f := range in.funcs {
			name := fmt.Sprintf("wasmsched:plugin/%s@%s#%s", in.name, version, f.wit)
			fmt.Fprintf(&b, "//go:wasmexport %s\n", name)
			if f.result {
				fmt.Fprintf(&b, "func %s(%s) uint32 {\n\tr := %s\n\tcollectIfDue()\n\treturn r\n}\n\n", f.goName, f.params, f.call)
				fmt.Fprintf(&b, "//go:wasmexport cabi_post_%s\n", name)
				fmt.Fprintf(&b, "func %sPost(uint32) { abiPostReturn() }\n\n", f.goName)
			} else {
				fmt.Fprintf(&b, "func %s(%s) {\n\t%s\n\tcollectIfDue()\n}\n\n", f.goName, f.params, f.call)
			}
		}
		if err := add("export_"+strings.ReplaceAll(in.name, "-", "_")+"_gen.go", b.String()); err != nil {
			return nil, err
		}
	}
	files["cmd/build-plugin/contract.wit"] = []byte(wit)
	return files, nil
}

func signatures() []string {
	var out []string
	for _, in := range interfaces {
		for _, f := range in.funcs {
			out = append(out, f.signature)
		}
	}
	return out
}

func main() {
	wit := flag.String("wit", "../../wit/history/0.2.0/plugin.wit", "the contract")
	check := flag.Bool("check", false, "only check that the files are current")
	flag.Parse()
	if err := run(*wit, *check); err != nil {
		fmt.Fprintf(os.Stderr, "error: gencontract: %v\n", err)
		os.Exit(1)
	}
}

func run(witPath string, check bool) error {
	text, err := os.ReadFile(witPath)
	if err != nil {
		return err
	}
	files, err := Generate(string(text))
	if err != nil {
		return fmt.Errorf("%s: %v", witPath, err)
	}
	for path, want := range files {
		if check {
			have, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(have, want) {
				return fmt.Errorf("%s is not current: run `go generate ./...` in plugins/sdk-go", path)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			return err
		}
	}
	return nil
}
