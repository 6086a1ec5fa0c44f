package static

// BackPage is the data of the "back" template, the page of an e-mail reminder's link
// /q/{queue}/back/{code}. Live: the link is unspent; its button POSTs to Action. Spent: a
// POST found it used or expired. Queue is "" when the queue or the feature is unknown.
type BackPage struct {
	Lang   string
	T      map[string]string
	Queue  string
	Live   bool
	Spent  bool
	Action string
}
