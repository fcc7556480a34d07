package args

import "testing"

type weights struct {
	Batch uint32 `json:"batch"`
}

type config struct {
	Policy  string  `json:"policy"`
	Weights weights `json:"weights"`
}

func TestParse(t *testing.T) {
	var c config
	if err := Parse("p", "", &c); err != nil || c != (config{}) {
		t.Fatalf("empty text: %v %+v", err, c)
	}
	if err := Parse("p", `{"policy": "origin", "weights": {"batch": 3}}`, &c); err != nil || c.Policy != "origin" || c.Weights.Batch != 3 {
		t.Fatalf("%v %+v", err, c)
	}
	for text, want := range map[string]string{
		`{"weights": {"batch": "x"}}`: "p args: field weights.batch: expected uint32, got string",
		`{"polcy": "origin"}`:         `p args: unknown field "polcy"`,
		`[1]`:                         "p args: expected a JSON object",
		`{"policy": `:                 "p args: unexpected EOF",
		`{} {}`:                       "p args: unexpected text after the JSON object",
	} {
		var c config
		if err := Parse("p", text, &c); err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %s", text, err, want)
		}
	}
}
