package mcpapps

import "fmt"

// Permission names as the specification writes them in
// _meta.ui.permissions, for the configuration file and the admin console.
// Forms is not among them: the service grants it to every view that asks.
const (
	PermissionCamera         = "camera"
	PermissionMicrophone     = "microphone"
	PermissionGeolocation    = "geolocation"
	PermissionClipboardWrite = "clipboardWrite"
)

// GrantablePermissions returns the permission names an operator or a
// tenant admin may allow a server's views, in the order they are shown.
func GrantablePermissions() []string {
	return []string{PermissionCamera, PermissionMicrophone, PermissionGeolocation, PermissionClipboardWrite}
}

// ParsePermissions reads a list of permission names into Permissions,
// refusing an unknown name and "forms" (which needs no allowing).
func ParsePermissions(names []string) (Permissions, error) {
	var p Permissions
	for _, n := range names {
		switch n {
		case PermissionCamera:
			p.Camera = true
		case PermissionMicrophone:
			p.Microphone = true
		case PermissionGeolocation:
			p.Geolocation = true
		case PermissionClipboardWrite:
			p.ClipboardWrite = true
		default:
			return Permissions{}, fmt.Errorf("unknown permission %.40q: want one of camera, microphone, geolocation, clipboardWrite", n)
		}
	}
	return p, nil
}

// Names lists the permissions set in p, forms last, as the specification
// names them.
func (p Permissions) Names() []string {
	var out []string
	for _, f := range []struct {
		on   bool
		name string
	}{{p.Camera, PermissionCamera}, {p.Microphone, PermissionMicrophone}, {p.Geolocation, PermissionGeolocation}, {p.ClipboardWrite, PermissionClipboardWrite}, {p.Forms, "forms"}} {
		if f.on {
			out = append(out, f.name)
		}
	}
	return out
}

// Grant is what a view gets of what its resource asked for (p): forms
// whenever asked, and each other permission only where allowed. Nothing
// that was not asked for is ever granted.
func (p Permissions) Grant(allowed Permissions) Permissions {
	return Permissions{
		Camera:         p.Camera && allowed.Camera,
		Microphone:     p.Microphone && allowed.Microphone,
		Geolocation:    p.Geolocation && allowed.Geolocation,
		ClipboardWrite: p.ClipboardWrite && allowed.ClipboardWrite,
		Forms:          p.Forms,
	}
}

// Union is every permission set in p or q.
func (p Permissions) Union(q Permissions) Permissions {
	return Permissions{
		Camera:         p.Camera || q.Camera,
		Microphone:     p.Microphone || q.Microphone,
		Geolocation:    p.Geolocation || q.Geolocation,
		ClipboardWrite: p.ClipboardWrite || q.ClipboardWrite,
		Forms:          p.Forms || q.Forms,
	}
}

// PolicyFeatures are the Permissions Policy features of the granted
// permissions, as a frame's allow attribute lists them (forms is a sandbox
// flag, not a feature). The specification maps clipboardWrite to
// clipboard-write.
func (p Permissions) PolicyFeatures() []string {
	var out []string
	for _, f := range []struct {
		on      bool
		feature string
	}{{p.Camera, "camera"}, {p.Microphone, "microphone"}, {p.Geolocation, "geolocation"}, {p.ClipboardWrite, "clipboard-write"}} {
		if f.on {
			out = append(out, f.feature)
		}
	}
	return out
}
