// Command build-plugin builds a Go wasmsched plugin into a component, in
// one step:
//
//		go run wasmsched.io/plugin-sdk-go/cmd/build-plugin [-o OUT.wasm] [-jco DIR] PACKAGE
//
//	 1. runs PACKAGE natively with WASMSCHED_SDK_DESCRIBE=1: sdk.Register
//	    prints the extension points the plugin type implements, and exits;
//	 2. `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared` with one build
//	    tag per implemented point, so the core module exports exactly those
//	    interfaces (a WASI reactor: the host calls its exports);
//	 3. embeds a world of those exports (the contract, contract.wit, plus a
//	    `go-plugin` world) and makes the component with the WASI 0.1 reactor
//	    adapter, through jco's build of wasm-tools (`component embed` and
//	    `component new`): the Go runtime's WASI 0.1 imports (clocks, random,
//	    fd_write, poll_oneoff, ...) become WASI 0.2 imports the scheduler
//	    links (cli, clocks, io, random, filesystem without directories).
//
// jco comes from DIR (-jco, or WASMSCHED_JCO_DIR), else
// ${WASMSCHED_CACHE_DIR:-~/.cache/wasmsched}/tools/jco-1.35.0, installed
// there with npm on first use (as scripts/build-example-plugins does).
package main

import (
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

//go:embed contract.wit
var contract string

// JcoVersion is the jco release whose wasm-tools and adapter are used.
const JcoVersion = "1.35.0"

// MinGo is the first Go with `//go:wasmexport` and c-shared wasip1.
const MinGo = "1.24"

const describeEnv = "WASMSCHED_SDK_DESCRIBE"
const describePrefix = "wasmsched-sdk-points:"

// optional are the contract's optional interfaces, in the order the
// world lists them.
var optional = []string{"interests", "filter", "score", "normalize-score", "post-filter",
	"reserve", "permit", "pre-bind", "deletion-cost"}

func main() {
	out := flag.String("o", "", "output component (default: the package directory's name + .wasm)")
	jcoDir := flag.String("jco", os.Getenv("WASMSCHED_JCO_DIR"), "directory with jco "+JcoVersion+" installed (node_modules/@bytecodealliance/jco)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: build-plugin [-o OUT.wasm] [-jco DIR] PACKAGE\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := build(flag.Arg(0), *out, *jcoDir); err != nil {
		fmt.Fprintf(os.Stderr, "error: build-plugin: %v\n", err)
		os.Exit(1)
	}
}

func build(pkg, out, jcoDir string) error {
	if out == "" {
		abs, err := filepath.Abs(pkg)
		if err != nil {
			return err
		}
		out = filepath.Base(abs) + ".wasm"
	}
	if err := checkGo(); err != nil {
		return err
	}
	points, err := describe(pkg)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "build-plugin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	core := filepath.Join(tmp, "core.wasm")
	tags := make([]string, len(points))
	for i, p := range points {
		tags[i] = "wasmsched_" + strings.ReplaceAll(p, "-", "_")
	}
	args := []string{"build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w", "-o", core}
	if len(tags) > 0 {
		args = append(args, "-tags="+strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared) of %s failed", pkg)
	}

	world := contract + "\n/// Written by cmd/build-plugin: the exports of this plugin.\nworld go-plugin {\n    import host;\n    export lifecycle;\n"
	for _, p := range points {
		world += "    export " + p + ";\n"
	}
	world += "}\n"
	witFile := filepath.Join(tmp, "world.wit")
	if err := os.WriteFile(witFile, []byte(world), 0o644); err != nil {
		return err
	}
	jco, err := findJco(jcoDir)
	if err != nil {
		return err
	}
	outAbs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	node := exec.Command("node", "--input-type=module", "-e", componentize, jco, core, witFile, "go-plugin", outAbs+".tmp")
	node.Stdout, node.Stderr = os.Stderr, os.Stderr
	if err := node.Run(); err != nil {
		os.Remove(outAbs + ".tmp")
		return errors.New("making the component failed (jco's wasm-tools component embed / new, above)")
	}
	if err := os.Rename(outAbs+".tmp", outAbs); err != nil {
		return err
	}
	info, err := os.Stat(outAbs)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "build-plugin: %s: %d bytes, exports lifecycle%s\n", out, info.Size(),
		strings.TrimSuffix(", "+strings.Join(points, ", "), ", "))
	return nil
}

var goVersion = regexp.MustCompile(`^go([0-9]+)\.([0-9]+)`)

// checkGo checks that the go command is there and at least MinGo.
func checkGo() error {
	v, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return errors.New("the go command is missing (Go " + MinGo + " or newer is needed)")
	}
	m := goVersion.FindStringSubmatch(strings.TrimSpace(string(v)))
	if m == nil {
		return nil // a development version: assume it is recent
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	if major == 1 && minor < 24 {
		return fmt.Errorf("%s is too old: Go %s or newer is needed (//go:wasmexport)", strings.TrimSpace(string(v)), MinGo)
	}
	return nil
}

// describe runs the plugin natively in describe mode and returns the
// points it implements, in world order.
func describe(pkg string) ([]string, error) {
	hostOS, _ := exec.Command("go", "env", "GOHOSTOS").Output()
	hostArch, _ := exec.Command("go", "env", "GOHOSTARCH").Output()
	cmd := exec.Command("go", "run", pkg)
	cmd.Env = append(os.Environ(), describeEnv+"=1", "CGO_ENABLED=0",
		"GOOS="+strings.TrimSpace(string(hostOS)), "GOARCH="+strings.TrimSpace(string(hostArch)))
	cmd.Stderr = os.Stderr
	text, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("running %s natively to find its extension points failed", pkg)
	}
	for _, line := range strings.Split(string(text), "\n") {
		if rest, ok := strings.CutPrefix(line, describePrefix); ok {
			found := map[string]bool{}
			for _, p := range strings.Fields(rest) {
				found[p] = true
			}
			var points []string
			for _, p := range optional {
				if found[p] {
					points = append(points, p)
					delete(found, p)
				}
			}
			if len(found) > 0 {
				return nil, fmt.Errorf("%s names extension points this build command does not know: %v", pkg, found)
			}
			return points, nil
		}
	}
	return nil, fmt.Errorf("%s did not call sdk.Register (from an init function of package main)", pkg)
}

// findJco returns the directory jco is installed in, installing it with
// npm when needed.
func findJco(dir string) (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", errors.New("node is missing (needed to run jco's wasm-tools): install Node.js 18 or newer")
	}
	if dir == "" {
		cache := os.Getenv("WASMSCHED_CACHE_DIR")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", err
			}
			cache = filepath.Join(home, ".cache", "wasmsched")
		}
		dir = filepath.Join(cache, "tools", "jco-"+JcoVersion)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules/@bytecodealliance/jco-transpile/dist/wasm-tools.js")); err == nil {
		return dir, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("jco is not installed in %s and npm is missing to install it", dir)
	}
	fmt.Fprintf(os.Stderr, "build-plugin: installing @bytecodealliance/jco %s into %s (npm, once)\n", JcoVersion, dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	npm := exec.Command("npm", "install", "--no-audit", "--no-fund", "--silent", "@bytecodealliance/jco@"+JcoVersion)
	npm.Dir, npm.Stdout, npm.Stderr = dir, os.Stderr, os.Stderr
	if err := npm.Run(); err != nil {
		return "", fmt.Errorf("npm install @bytecodealliance/jco@%s failed", JcoVersion)
	}
	return dir, nil
}

// componentize is run by node: argv JCO_DIR CORE WIT WORLD OUT. jco's
// command line reads WIT files through a WASI shim without preopened
// directories, so the script passes the WIT's text instead.
const componentize = `
import { readFile, writeFile } from 'node:fs/promises';
const [jco, corePath, witPath, world, out] = process.argv.slice(1);
const bca = jco + '/node_modules/@bytecodealliance/';
const { componentEmbed, componentNew } = await import(bca + 'jco-transpile/dist/wasm-tools.js');
const core = await readFile(corePath);
const witSource = await readFile(witPath, 'utf8');
const adapter = await readFile(bca + 'jco/lib/wasi_snapshot_preview1.reactor.wasm');
const embedded = await componentEmbed({ binary: core, witSource, world });
await writeFile(out, await componentNew(embedded, [['wasi_snapshot_preview1', adapter]]));
`
