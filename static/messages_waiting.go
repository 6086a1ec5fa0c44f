package static

// messagesWaiting holds the UI strings of the waiting page and the index: the end of a sale,
// the per-address stream cap, leaving the line, the demo's lines, each as {English, Korean,
// Japanese}.
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

	// The zero-config demo's two lines: the index says what each is, the waiting page too,
	// with a link to the other.
	"index_demo_empty": {"Demo: an empty line — you go straight in.", "데모: 빈 줄 — 바로 입장합니다.", "デモ：空いている列 — すぐに入場できます。"},
	"index_demo_crowd": {
		"Demo: a line with a simulated crowd ahead of you — watch your place count down.",
		"데모: 앞에 가상의 대기 인원이 있는 줄 — 순번이 줄어드는 것을 볼 수 있습니다.",
		"デモ：前にシミュレーションの行列がある列 — 順番が進んでいく様子を見られます。",
	},
	"demo_label": {"Demo", "데모", "デモ"},
	"demo_empty_note": {
		"This is a demo with an empty line: nobody waits ahead of you, so you go straight in.",
		"빈 줄의 데모입니다. 앞에 기다리는 사람이 없어 바로 입장합니다.",
		"空いている列のデモです。前に誰も並んでいないので、すぐに入場できます。",
	},
	"demo_crowd_note": {
		"This is a demo: the people ahead of you are a simulated crowd, let in a few every second, so you can watch your place count down to your turn.",
		"데모입니다. 앞에 있는 사람들은 가상의 대기 인원으로, 매초 몇 명씩 입장하므로 차례가 올 때까지 순번이 줄어드는 것을 볼 수 있습니다.",
		"これはデモです。前に並んでいるのはシミュレーションの行列で、毎秒数人ずつ入場するので、順番が来るまで番号が減っていく様子を見られます。",
	},
	"demo_switch_empty": {"Switch to the empty line", "빈 줄로 바꾸기", "空いている列に切り替える"},
	"demo_switch_crowd": {"Switch to the line with a simulated crowd", "가상의 대기 인원이 있는 줄로 바꾸기", "シミュレーションの行列がある列に切り替える"},
}
