// Package kubernetes holds the Kubernetes manifests of teamsbot (base/ and
// the overlays single and replicated, rendered with kustomize) and, in its
// tests alone, the check that every overlay renders, that each object it
// renders is a valid object of the Kubernetes API, and that what the
// manifests set agrees with the image and with the service's settings.
//
// The package has no code of its own: kustomize and the Kubernetes API
// types are large modules, and only this package's tests import them.
package kubernetes
