package static

// messagesSnapshots holds the UI strings of the index page's pages (the index lists its
// queues a page at a time), each as {English, Korean, Japanese}. builtinTables
// merges it into the three tables; the parity test checks it like the others.
var messagesSnapshots = map[string][3]string{
	"index_pages":   {"Pages of lines", "대기열 목록 페이지", "待ち行列の一覧のページ"},
	"index_page_of": {"Page {page} of {pages}", "{pages}페이지 중 {page}페이지", "{pages}ページ中{page}ページ目"},
	"index_prev":    {"Previous page", "이전 페이지", "前のページ"},
	"index_next":    {"Next page", "다음 페이지", "次のページ"},
}
