package kubernetes

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// containerfile is the image's recipe, which deploy/image.sh builds.
const containerfile = "../Containerfile"

// The image's user, group and data folder as agreed for the image, the
// facts the manifests are held to while the recipe is not in this tree.
const (
	agreedUID  = 65532
	agreedGID  = 65532
	agreedData = "/data"
)

// image is what the manifests must agree with: the user the image runs
// as, its data folder and the variables it sets.
type image struct {
	uid, gid int64
	data     string
	env      map[string]string
}

// readImage reads the image's user (USER uid:gid), its variables (ENV)
// and its data folder (VOLUME, else TICKETIQ_DATA) from the recipe.
func readImage(t *testing.T) image {
	t.Helper()
	raw, err := os.ReadFile(containerfile)
	if os.IsNotExist(err) {
		t.Logf("%s is not in this tree: holding the manifests to the agreed user %d:%d and data folder %s", containerfile, agreedUID, agreedGID, agreedData)
		return image{uid: agreedUID, gid: agreedGID, data: agreedData, env: map[string]string{"TICKETIQ_DATA": agreedData}}
	}
	if err != nil {
		t.Fatal(err)
	}
	img := parseContainerfile(t, string(raw))
	if img.uid == 0 || img.data == "" {
		t.Fatalf("%s names no non-root USER uid:gid or no data folder (VOLUME or ENV TICKETIQ_DATA)", containerfile)
	}
	return img
}

// parseContainerfile reads the instructions of the final stage.
func parseContainerfile(t *testing.T, text string) image {
	t.Helper()
	img := image{env: map[string]string{}}
	text = strings.ReplaceAll(text, "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		inst, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(inst) {
		case "FROM": // a new stage: only the last one is the image
			img = image{env: map[string]string{}}
		case "USER":
			u, g, _ := strings.Cut(rest, ":")
			uid, err1 := strconv.ParseInt(u, 10, 64)
			gid, err2 := strconv.ParseInt(g, 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: USER %s is not numeric uid:gid, which runAsUser needs", containerfile, rest)
			}
			img.uid, img.gid = uid, gid
		case "ENV":
			for _, kv := range regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S*)`).FindAllStringSubmatch(rest, -1) {
				img.env[kv[1]] = strings.Trim(kv[2], `"`)
			}
		case "VOLUME":
			v := strings.Trim(rest, `[]" `)
			img.data = filepath.Clean(v)
		}
	}
	if img.data == "" {
		img.data = img.env["TICKETIQ_DATA"]
	}
	return img
}
