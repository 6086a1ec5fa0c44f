// Package deploy holds the files that run waitroom outside `go run`: nginx sites
// (nginx.conf, nginx-auth-request.conf), the Kubernetes manifests (k8s/, a module of its
// own with its own test), and the tests of the repository's Dockerfile, .dockerignore and
// docker-compose.yml. No engine runs containers where the tests run, so the tests read the
// files instead: compose_test.go decodes docker-compose.yml strictly and checks the start
// order, healthchecks and restart policies; dockerfile_test.go checks the image's healthcheck,
// user, demo setting and version stamp, and that .dockerignore leaves in what the build
// reads. The nginx sites run for real in server/nginx_e2e_test.go.
package deploy
