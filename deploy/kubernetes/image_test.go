package kubernetes

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// imageFacts is the file that states the container image's fixed facts
// (its user, its volume, its ports), which deploy/image.sh builds the
// image from and whatever runs the image must agree with.
const imageFacts = "../image.env"

// agreed are the image's facts as agreed for the image, which the
// manifests are held to while imageFacts is not in this tree.
var agreed = map[string]string{
	"IMAGE_UID": "65532", "IMAGE_GID": "65532", "IMAGE_DATA": "/data",
	"IMAGE_PORT": "3978", "IMAGE_METRICS_PORT": "9090",
}

// image is what the manifests must agree with: the user the image runs
// as, its data folder, its two ports and the variables it sets.
type image struct {
	uid, gid          int64
	data              string
	port, metricsPort int32
	env               map[string]string
}

// readImage reads the image's facts.
func readImage(t *testing.T) image {
	t.Helper()
	facts := agreed
	raw, err := os.ReadFile(imageFacts)
	switch {
	case os.IsNotExist(err):
		t.Logf("%s is not in this tree: holding the manifests to the image's facts as agreed, %v", imageFacts, agreed)
	case err != nil:
		t.Fatal(err)
	default:
		facts = map[string]string{}
		for _, line := range strings.Split(string(raw), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if k, v, ok := strings.Cut(line, "="); ok {
				facts[k] = v
			}
		}
	}
	number := func(name string) int64 {
		n, err := strconv.ParseInt(facts[name], 10, 32)
		if err != nil || n <= 0 {
			t.Fatalf("%s: %s=%q is not a positive number", imageFacts, name, facts[name])
		}
		return n
	}
	img := image{
		uid: number("IMAGE_UID"), gid: number("IMAGE_GID"), data: facts["IMAGE_DATA"],
		port: int32(number("IMAGE_PORT")), metricsPort: int32(number("IMAGE_METRICS_PORT")),
	}
	if img.data == "" {
		t.Fatalf("%s states no IMAGE_DATA", imageFacts)
	}
	// The variables the image sets: its listeners and its data folder.
	img.env = map[string]string{
		"TICKETIQ_ADDR":         fmt.Sprintf(":%d", img.port),
		"TICKETIQ_METRICS_ADDR": fmt.Sprintf(":%d", img.metricsPort),
		"TICKETIQ_DATA":         img.data,
	}
	return img
}
