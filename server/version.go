package main

// version is the release this binary was built from, stamped at link time:
//
//	go build -ldflags "-X main.version=v1.4.0" ./server
//
// The Dockerfile passes its VERSION build argument this way (deploy/dockerfile_test.go
// checks that the name it stamps is this variable: -X on a name that does not exist is
// silently ignored). Empty in a plain build, where the build information Go records (the
// VCS revision) tells builds apart.
var version string
