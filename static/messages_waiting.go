package static

// messagesWaiting holds the UI strings of the waiting page and the index: the end of a sale,
// the per-address stream cap, leaving the line, each as {English, Korean, Japanese}.
// builtinTables merges it into the three tables; the parity test checks it like the others.
var messagesWaiting = map[string][3]string{
	// The index: every listed queue's state, and what a buyer can do there.
	"badge_scheduled":     {"Scheduled", "예정", "予定"},
	"badge_ended":         {"Ended", "종료", "終了"},
	"index_starts":        {"Starts", "시작 시각", "開始時刻"},
	"index_ended_at":      {"Ended", "종료 시각", "終了時刻"},
	"index_prequeue":      {"Waiting for the start", "시작 대기 인원", "開始待ちの人数"},
	"index_join_early":    {"Get in line before the start", "시작 전에 줄 서기", "開始前に並ぶ"},
	"index_sold_out_note": {"Sold out — not taking new people", "품절 — 새로 줄을 설 수 없습니다", "売り切れ — 新しく並ぶことはできません"},
	"index_ended_note":    {"This sale has ended", "이 판매는 종료되었습니다", "この販売は終了しました"},

	// The waiting page: the end of the sale, shown before it happens.
	"ends_label": {"This sale ends at", "판매 종료 시각:", "販売終了時刻:"},
	"ends_warning": {
		"Your estimated wait goes past the end of the sale at {time}: the sale may end before your turn.",
		"예상 대기 시간이 판매 종료 시각({time})을 넘습니다. 차례가 오기 전에 판매가 끝날 수 있습니다.",
		"予想待ち時間が販売終了時刻（{time}）を過ぎています。順番が来る前に販売が終わる可能性があります。",
	},

	// A state that lets nobody in shows no rate (sold out, paused).
	"rate_stopped": {"Nobody right now", "지금은 없음", "現在なし"},

	// The per-address stream cap: the page polls instead, and says why.
	"stream_limited": {
		"Too many pages from your network share this connection, so this page cannot get live updates. Your place is kept; updates come every {n} s.",
		"같은 네트워크에서 열린 페이지가 너무 많아 이 페이지는 실시간 업데이트를 받을 수 없습니다. 순번은 그대로 유지되며, {n}초마다 새로 고칩니다.",
		"同じネットワークから開かれているページが多すぎるため、このページはリアルタイムの更新を受け取れません。順番はそのまま保たれ、{n}秒ごとに更新されます。",
	},
	"conn_polling": {"Updating every {n} s", "{n}초마다 갱신", "{n}秒ごとに更新"},

	// Leaving the line asks first (the place cannot be given back).
	"leave_confirm_title": {"Leave the line?", "대기열에서 나갈까요?", "列から抜けますか？"},
	"leave_confirm_body": {
		"You will give up your place, and it cannot be given back. If you join again later, you get a new place.",
		"지금 순번을 포기하게 되며, 되돌릴 수 없습니다. 나중에 다시 줄을 서면 새 순번을 받습니다.",
		"今の順番を手放すことになり、元には戻せません。あとでもう一度並ぶと、新しい順番になります。",
	},
	"leave_confirm_stay": {"Stay in line", "계속 기다리기", "並び続ける"},
}
