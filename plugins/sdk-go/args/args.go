// Package args reads a plugin's `pluginConfig` args (JSON text) into a Go
// struct, with errors that name the plugin and the field. It is a package
// of its own because encoding/json adds about 1.4 MB to a component: a
// plugin without args uses sdk.NoArgs instead.
package args

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// Parse reads a plugin's `pluginConfig` args (JSON text; empty text
// means `{}`) into v, a pointer to a struct with `json` tags. Unknown
// fields are errors. Errors read `NAME args: MESSAGE`, naming the field
// where one is at fault (`NAME args: field weights.batch: expected uint32,
// got string`): that is what the operator sees when the scheduler refuses
// to start.
func Parse(plugin, text string, v any) error {
	if strings.TrimSpace(text) == "" {
		text = "{}"
	}
	trimmed := strings.TrimSpace(text)
	if !strings.HasPrefix(trimmed, "{") {
		var probe any
		if err := json.Unmarshal([]byte(trimmed), &probe); err != nil {
			return errors.New(plugin + " args: " + jsonMessage(err))
		}
		return errors.New(plugin + " args: expected a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New(plugin + " args: " + jsonMessage(err))
	}
	if dec.More() {
		return errors.New(plugin + " args: unexpected text after the JSON object")
	}
	return nil
}

func jsonMessage(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return "field " + typeErr.Field + ": expected " + typeErr.Type.String() + ", got " + typeErr.Value
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}
