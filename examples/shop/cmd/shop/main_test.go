package main

import (
	"io"
	"strings"
	"testing"
)

func TestRunRefusesBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-room", "http://localhost:8080/some/path"}, "room"},
		{[]string{"-queue", "a b"}, "queue"},
		{[]string{"-product", ""}, "product"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"-nope"}, "not defined"},
	} {
		err := run(c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run(%q) = %v, want an error about %s", c.args, err, c.want)
		}
	}
}
