package main

import (
	"strings"
	"testing"
)

// A rotated key must be known to every verifier before it signs: the publish delay covers
// one key refresh (the last instance re-reads the keys) plus the JWKS cache lifetime (the
// last verifier's copy expires). A shorter one stops the start with one line saying so.
func TestKeyPublishDelayCoversRefreshAndJWKSCache(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		fail bool
	}{
		{map[string]string{}, false}, // 60 s > 30 s + 15 s
		{map[string]string{"WR_KEY_PUBLISH_DELAY": "45s"}, true},
		{map[string]string{"WR_KEY_PUBLISH_DELAY": "46s"}, false},
		{map[string]string{"WR_KEY_PUBLISH_DELAY": "20s", "WR_KEY_REFRESH": "10s"}, true},
		{map[string]string{"WR_KEY_PUBLISH_DELAY": "60s", "WR_KEY_REFRESH": "30s", "WR_JWKS_MAX_AGE": "1m"}, true},
		{map[string]string{"WR_KEY_PUBLISH_DELAY": "1s", "WR_KEY_REFRESH": "200ms", "WR_JWKS_MAX_AGE": "0s"}, false},
		{map[string]string{"WR_KEY_PUBLISH_DELAY": "1s", "WR_KEY_REFRESH": "200ms"}, true},
	} {
		cfg, err := loadConfig(func(k string) string { return tc.env[k] })
		if tc.fail {
			if err == nil || !strings.Contains(err.Error(), "WR_KEY_PUBLISH_DELAY") || !strings.Contains(err.Error(), "WR_JWKS_MAX_AGE") || strings.Contains(err.Error(), "\n") {
				t.Errorf("%v: error %v, want one line naming the delay and what it must cover", tc.env, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.env, err)
		} else if cfg.KeyPublishDelay <= cfg.KeyRefresh+cfg.JWKSMaxAge {
			t.Errorf("%v: accepted %v ≤ %v + %v", tc.env, cfg.KeyPublishDelay, cfg.KeyRefresh, cfg.JWKSMaxAge)
		}
	}
	for _, bad := range []string{"-1s", "soon"} {
		if _, err := loadConfig(func(k string) string { return map[string]string{"WR_JWKS_MAX_AGE": bad}[k] }); err == nil || !strings.Contains(err.Error(), "WR_JWKS_MAX_AGE") {
			t.Errorf("WR_JWKS_MAX_AGE=%s: error %v", bad, err)
		}
	}
}
