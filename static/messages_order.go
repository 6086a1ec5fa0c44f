package static

// messagesOrder holds the UI strings of the order page that belongs to its queue, each as
// {English, Korean, Japanese}. builtinTables merges it into the three tables; the parity test
// checks it like the others.
var messagesOrder = map[string][3]string{
	"order_choose": {"Choose a product", "상품을 고르세요", "商品を選んでください"},
	"order_caps": {"Up to {order} per order, {ticket} in all per admission",
		"한 번에 최대 {order}개, 입장 한 번에 모두 {ticket}개까지",
		"1回の注文で{order}個まで、1回の入場で合計{ticket}個まで"},
	"order_not_here_title": {"This product is not sold in this line", "이 대기열에서 판매하지 않는 상품입니다", "この待ち行列では販売していない商品です"},
	"order_not_here_other": {"“{product}” is sold through the line “{queue}”, not this one. An admission to this line cannot buy it.",
		"‘{product}’ 상품은 이 대기열이 아니라 ‘{queue}’ 대기열에서 판매합니다. 이 대기열의 입장 권한으로는 살 수 없습니다.",
		"「{product}」はこの待ち行列ではなく「{queue}」の待ち行列で販売しています。この待ち行列の入場の権利では購入できません。"},
	"order_not_here_none": {"“{product}” is not on sale through the waiting room.",
		"‘{product}’ 상품은 대기열을 통해 판매하지 않습니다.",
		"「{product}」は待合室を通じて販売していません。"},
	"order_not_here_unknown": {"There is no product “{product}”.", "‘{product}’ 상품은 없습니다.", "「{product}」という商品はありません。"},
	"order_sold_here":        {"This line sells:", "이 대기열에서 판매하는 상품:", "この待ち行列で販売している商品:"},
	"order_other_line":       {"The line that sells it:", "판매하는 대기열:", "販売している待ち行列:"},
	"order_empty_title":      {"Nothing is on sale in this line", "이 대기열에서 판매 중인 상품이 없습니다", "この待ち行列で販売中の商品はありません"},
	"order_empty_body": {"This line has no product on sale right now. Come back later, or ask the shop.",
		"지금은 이 대기열에서 판매하는 상품이 없습니다. 나중에 다시 오시거나 쇼핑몰에 문의하세요.",
		"現在この待ち行列で販売している商品はありません。時間をおいてもう一度お越しいただくか、ショップにお問い合わせください。"},
	"order_moved":             {"This product is no longer sold in this line.", "이 상품은 이제 이 대기열에서 판매하지 않습니다.", "この商品はこの待ち行列では販売されなくなりました。"},
	"order_unavailable_title": {"The shop cannot be reached right now", "지금은 쇼핑몰에 연결할 수 없습니다", "現在ショップに接続できません"},
	"order_unavailable_body": {"This page tries again by itself in a few seconds.",
		"이 페이지는 몇 초 뒤 자동으로 다시 시도합니다.",
		"このページは数秒後に自動で再試行します。"},
}
