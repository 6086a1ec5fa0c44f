// Package k8s holds the Kubernetes manifests for running N waitroom instances (the *.yaml
// files beside this one) and their test: manifests_test.go decodes every document strictly
// into the Kubernetes API types (k8s.io/api) and checks it against the server's settings
// (../../server/config.go). It is a module of its own, so the root module's dependency list
// does not carry the Kubernetes API types: run it with
//
//	cd deploy/k8s && go test ./...
package k8s
