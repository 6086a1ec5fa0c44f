package static

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"path"
	"strings"
	"sync"
)

// Asset URLs carry a content hash: /static/queue.<10 hex>.js. A page names its scripts and
// stylesheet by that URL (the "asset" template function), so a page and its scripts always
// come from the same release: during a rolling deploy an instance of another release does not
// have that hash and answers 404 (the load balancer may then try the next instance — see
// deploy/nginx.conf) instead of serving a script the page was not written for. The plain name
// (/static/queue.js) stays served for embedders such as a shop's <script src=…/waitroom.js>.

var (
	hashOnce  sync.Once
	hashByKey map[string]string // "queue.js" → "queue.1a2b3c4d5e.js"
	keyByHash map[string]string // the reverse
)

func loadHashes() {
	hashByKey, keyByHash = map[string]string{}, map[string]string{}
	_ = fs.WalkDir(Assets(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(Assets(), p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ext := path.Ext(p)
		h := strings.TrimSuffix(p, ext) + "." + hex.EncodeToString(sum[:5]) + ext
		hashByKey[p], keyByHash[h] = h, p
		return nil
	})
}

// AssetURL is the content-hashed URL of an asset ("queue.js" → "/static/queue.1a2b3c4d5e.js");
// an unknown name gives the plain /static/<name>.
func AssetURL(name string) string {
	hashOnce.Do(loadHashes)
	if h, ok := hashByKey[name]; ok {
		return "/static/" + h
	}
	return "/static/" + name
}

// HashedAsset resolves a content-hashed file name ("queue.1a2b3c4d5e.js") to the asset it
// names in this release ("queue.js"); ok is false for a name of another release.
func HashedAsset(name string) (string, bool) {
	hashOnce.Do(loadHashes)
	k, ok := keyByHash[name]
	return k, ok
}

// LooksHashed tells whether name has the shape of a hashed asset name (<base>.<10 hex>.<ext>),
// whichever release it comes from.
func LooksHashed(name string) bool {
	ext := path.Ext(name)
	rest := strings.TrimSuffix(name, ext)
	i := strings.LastIndexByte(rest, '.')
	if i < 0 || len(rest)-i-1 != 10 {
		return false
	}
	_, err := hex.DecodeString(rest[i+1:])
	return err == nil
}
