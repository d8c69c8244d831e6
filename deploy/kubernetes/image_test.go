package kubernetes

import (
	"fmt"
	"teamsbot/deploy"
	"testing"
)

// image is what the manifests must agree with: the user the image runs
// as, its data folder, its two ports and the variables it sets.
type image struct {
	uid, gid          int64
	data              string
	port, metricsPort int32
	env               map[string]string
}

// readImage reads the image's facts from deploy/image.env, the one file
// that states them (deploy.ImageFacts).
func readImage(t *testing.T) image {
	t.Helper()
	facts, err := deploy.ImageFacts()
	if err != nil {
		t.Fatal(err)
	}
	img := image{
		uid: int64(facts.UID), gid: int64(facts.GID), data: facts.Data,
		port: int32(facts.Port), metricsPort: int32(facts.MetricsPort),
	}
	// The variables the image sets: its listeners and its data folder.
	img.env = map[string]string{
		"TICKETIQ_ADDR":         fmt.Sprintf(":%d", img.port),
		"TICKETIQ_METRICS_ADDR": fmt.Sprintf(":%d", img.metricsPort),
		"TICKETIQ_DATA":         img.data,
	}
	return img
}
