package static

// messagesReport holds the UI strings of the report page: sold-out time, places dropped at the
// end, each as {English, Korean, Japanese}. builtinTables merges it into the three tables; the
// parity test checks it like the others.
var messagesReport = map[string][3]string{
	// Where every place went: joined = admitted + abandoned + left + dropped + still waiting.
	"report_dropped":       {"Dropped at the end", "종료 시 정리됨", "終了時に打ち切り"},
	"report_still_waiting": {"Still waiting", "아직 대기 중", "まだ待機中"},
	"report_places":        {"Where every place went", "모든 자리의 행방", "すべての順番の行方"},
	"report_identity": {"{joined} joined = {admitted} admitted + {abandoned} abandoned + {left} left the line + {dropped} dropped at the end + {waiting} still waiting",
		"참여 {joined} = 입장 {admitted} + 이탈 {abandoned} + 대기 취소 {left} + 종료 시 정리 {dropped} + 아직 대기 {waiting}",
		"参加 {joined} = 入場 {admitted} + 離脱 {abandoned} + 取り消し {left} + 終了時に打ち切り {dropped} + まだ待機 {waiting}"},
	"report_unaccounted": {"{n} places are not accounted for: instances of an older release took part and did not count them, or the line changed while the report was read (read it again).",
		"{n}개의 자리는 집계되지 않았습니다. 이전 릴리스의 인스턴스가 함께 실행되어 세지 않았거나, 보고서를 읽는 동안 대기열이 바뀌었습니다(다시 불러오세요).",
		"{n} 件の順番は集計されていません。旧リリースのインスタンスが動いていて数えなかったか、レポートの読み込み中に待ち行列が変わりました(もう一度読み込んでください)。"},
	"report_expired_part": {"Tokens expired unused are part of the admitted.", "사용되지 않고 만료된 토큰은 입장에 포함됩니다.", "使われずに期限切れになったトークンは入場に含まれます。"},
	// Sold out: each period, from the sell-out to the restock.
	"report_soldout_periods": {"Sold out", "품절 기간", "売り切れ期間"},
	"report_period":          {"{from} to {to}", "{from}부터 {to}까지", "{from} から {to} まで"},
	"report_period_open":     {"since {from}, still sold out", "{from}부터 현재까지 품절", "{from} から売り切れ中"},
	"report_period_length":   {"{from} to {to} ({length})", "{from}부터 {to}까지 ({length})", "{from} から {to} まで({length})"},
}
