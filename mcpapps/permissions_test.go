package mcpapps

import (
	"slices"
	"testing"
)

func TestGrantGivesOnlyWhatWasAskedAndAllowed(t *testing.T) {
	all := Permissions{Camera: true, Microphone: true, Geolocation: true, ClipboardWrite: true, Forms: true}
	tests := []struct {
		name           string
		asked, allowed Permissions
		want           []string
	}{
		{"nothing allowed: forms only", all, Permissions{}, []string{"forms"}},
		{"allowed but not asked", Permissions{}, all, nil},
		{"microphone asked and allowed", Permissions{Microphone: true, Camera: true}, Permissions{Microphone: true}, []string{"microphone"}},
		{"everything", all, all, []string{"camera", "microphone", "geolocation", "clipboardWrite", "forms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.asked.Grant(tt.allowed).Names(); !slices.Equal(got, tt.want) {
				t.Errorf("granted %v, want %v", got, tt.want)
			}
		})
	}
	if got := all.PolicyFeatures(); !slices.Equal(got, []string{"camera", "microphone", "geolocation", "clipboard-write"}) {
		t.Errorf("PolicyFeatures = %v", got)
	}
}

func TestParsePermissions(t *testing.T) {
	p, err := ParsePermissions(GrantablePermissions())
	if err != nil || !p.Camera || !p.Microphone || !p.Geolocation || !p.ClipboardWrite || p.Forms {
		t.Errorf("ParsePermissions(all) = %+v, %v", p, err)
	}
	for _, bad := range []string{"forms", "clipboard-write", "Camera", "", "usb"} {
		if _, err := ParsePermissions([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
