package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The generated files are current: the contract's version and exported
// names come from the contract the SDK implements (wit/history/0.2.0) and
// nowhere else.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	wit, err := os.ReadFile("../../../../wit/history/0.2.0/plugin.wit")
	if err != nil {
		t.Fatalf("the repository's contract: %v", err)
	}
	files, err := Generate(string(wit))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range files {
		have, err := os.ReadFile(filepath.Join("../..", path))
		if err != nil || !bytes.Equal(have, want) {
			t.Errorf("plugins/sdk-go/%s is not current: run `go generate ./...` in plugins/sdk-go", path)
		}
	}
	version, _ := Version(string(wit))
	if !bytes.Contains(files["contract_gen.go"], []byte(`const ContractVersion = "`+version+`"`)) {
		t.Errorf("contract_gen.go does not state version %s", version)
	}
}

func TestAChangedContractIsRefused(t *testing.T) {
	wit, err := os.ReadFile("../../../../wit/history/0.2.0/plugin.wit")
	if err != nil {
		t.Fatal(err)
	}
	text := string(wit)
	for _, c := range []struct{ from, to, want string }{
		{"        amount: s64,", "        amount: s32,", "declarations changed"},
		{"filter: func(nodes: list<node-index>) -> list<option<rejection>>;", "filter: func(nodes: list<node-index>) -> list<rejection>;", "no longer declares `filter: func"},
		{"package wasmsched:plugin@", "package wasmsched:plugins@", "no `package wasmsched:plugin@X.Y.Z;` line"},
	} {
		if !strings.Contains(text, c.from) {
			t.Fatalf("the contract has no %q", c.from)
		}
		_, err := Generate(strings.Replace(text, c.from, c.to, 1))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s -> %s: error %v, want %q", c.from, c.to, err, c.want)
		}
	}
	// Comments may change freely.
	if _, err := Generate(strings.Replace(text, "/// Records shared", "/// The records shared", 1)); err != nil {
		t.Errorf("a comment change is refused: %v", err)
	}
}
