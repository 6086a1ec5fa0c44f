package static

// messagesDashboard holds the UI strings of the dashboard: products, confirmations of
// irreversible actions, the commitment, each as {English, Korean, Japanese}. builtinTables
// merges it into the three tables; the parity test checks it like the others.
var messagesDashboard = map[string][3]string{
	// Products: currency, price in major units, grouped by queue.
	"admin_product_price_major": {"Price", "가격", "価格"},
	"admin_product_currency":    {"Currency", "통화", "通貨"},
	"admin_currency_choose":     {"Choose a currency", "통화를 선택하세요", "通貨を選択"},
	"admin_currency_required":   {"Choose the currency of the price.", "가격의 통화를 선택하세요.", "価格の通貨を選んでください。"},
	"admin_price_whole":         {"{currency} prices are whole numbers, without decimals.", "{currency} 가격은 소수점 없는 정수로 입력합니다.", "{currency} の価格は小数なしの整数で入力します。"},
	"admin_price_decimals":      {"{currency} prices have at most {n} decimals.", "{currency} 가격은 소수점 이하 {n}자리까지 입력할 수 있습니다.", "{currency} の価格は小数点以下 {n} 桁までです。"},
	"admin_price_bad":           {"Enter the price as a number, like {example}.", "가격을 {example}처럼 숫자로 입력하세요.", "価格は {example} のように数字で入力してください。"},
	"admin_price_shows":         {"Buyers see {amount}", "구매자에게 {amount}(으)로 표시", "購入者には {amount} と表示"},
	"admin_product_id_rule":     {"Product ids are 1–64 characters from A–Z a–z 0–9 _ -.", "상품 ID는 A–Z a–z 0–9 _ - 중 1–64자입니다.", "商品 ID は A–Z a–z 0–9 _ - の 1〜64 文字です。"},
	"admin_products_group":      {"Sold through queue {name}", "대기열 {name}에서 판매", "待ち行列 {name} で販売"},
	"admin_products_group_none": {"Not on sale (no queue)", "판매하지 않음 (대기열 없음)", "販売していない(待ち行列なし)"},

	// Irreversible actions: the confirmation names the consequence.
	"admin_confirm_cannot_undo": {"This cannot be undone.", "이 작업은 되돌릴 수 없습니다.", "この操作は取り消せません。"},
	"admin_confirm_start_now": {"Start the sale of queue {name} now? The {n} people in the pre-queue are drawn into the line at once, the draw's seed is revealed and admission begins. The start can no longer be moved or cleared.",
		"대기열 {name}의 판매를 지금 시작할까요? 사전 대기 중인 {n}명이 즉시 추첨되어 줄에 배치되고, 추첨 시드가 공개되며 입장이 시작됩니다. 이후에는 시작 시각을 옮기거나 지울 수 없습니다.",
		"待ち行列 {name} の販売を今すぐ開始しますか?事前待機中の {n} 人がただちに抽選で列に並べられ、抽選のシードが公開され、入場が始まります。開始時刻は以後、変更も削除もできません。"},
	"admin_confirm_clear_start": {"An emptied start does not cancel a scheduled sale: it starts it now.",
		"시작 시각을 비워도 예약된 판매는 취소되지 않고 지금 바로 시작됩니다.",
		"開始時刻を空にしても予約済みの販売は取り消されず、今すぐ開始されます。"},
	"admin_confirm_start_now_ok": {"Start now and reveal the seed", "지금 시작하고 시드 공개", "今すぐ開始してシードを公開"},
	"admin_confirm_remove_logo": {"Remove the logo of queue {name}? Its waiting and order pages show no logo from now on; to have it back you upload the file again.",
		"대기열 {name}의 로고를 삭제할까요? 지금부터 대기 페이지와 주문 페이지에 로고가 표시되지 않으며, 되살리려면 파일을 다시 올려야 합니다.",
		"待ち行列 {name} のロゴを削除しますか?今後、待機ページと注文ページにロゴは表示されません。戻すにはファイルをもう一度アップロードします。"},
	"admin_confirm_unconfirmed": {"Not sent: this change has to be confirmed first.", "전송하지 않았습니다: 이 변경은 먼저 확인이 필요합니다.", "送信していません:この変更には先に確認が必要です。"},

	// The draw's commitment, shown when a start is saved.
	"admin_commitment_title": {"Draw commitment (SHA-256 of the seed)", "추첨 커밋먼트 (시드의 SHA-256)", "抽選のコミットメント(シードの SHA-256)"},
	"admin_commitment_publish": {"Publish this commitment before the start (on your site or social media): after the draw anyone can check that the revealed seed matches it, which proves the order was fixed before the start.",
		"시작 전에 이 커밋먼트를 공개하세요 (사이트나 SNS 등). 추첨 후 누구나 공개된 시드가 이 값과 일치하는지 확인할 수 있어, 순서가 시작 전에 정해졌음을 증명합니다.",
		"開始前にこのコミットメントを公開してください(サイトや SNS など)。抽選後、公開されたシードがこれと一致することを誰でも確かめられ、順番が開始前に決まっていたことの証明になります。"},
	"admin_commitment_after": {"The draw has run: its seed is published with the draw, where anyone can check it against this commitment.",
		"추첨이 끝났습니다. 시드는 추첨 결과와 함께 공개되어 누구나 이 커밋먼트와 대조할 수 있습니다.",
		"抽選は終わりました。シードは抽選結果とともに公開され、誰でもこのコミットメントと照合できます。"},
	"admin_commitment_copy":        {"Copy the commitment", "커밋먼트 복사", "コミットメントをコピー"},
	"admin_commitment_copied":      {"Commitment copied.", "커밋먼트를 복사했습니다.", "コミットメントをコピーしました。"},
	"admin_commitment_copy_failed": {"Copying failed: select the commitment and copy it.", "복사하지 못했습니다. 커밋먼트를 선택해 직접 복사하세요.", "コピーできませんでした。コミットメントを選択してコピーしてください。"},
	"admin_commitment_unavailable": {"The commitment cannot be read: {msg}", "커밋먼트를 읽을 수 없습니다: {msg}", "コミットメントを読み込めません:{msg}"},
	"admin_saved_commitment": {"Saved. The draw's commitment is below: publish it before the start.",
		"저장했습니다. 추첨 커밋먼트가 아래에 있습니다. 시작 전에 공개하세요.",
		"保存しました。抽選のコミットメントは下にあります。開始前に公開してください。"},

	// The logo's size limit (the contract's 100 KB, built as 100 KiB; the label is admin_logo).
	"admin_logo_too_big": {"This file is {size} KiB; a logo may be at most 100 KiB.", "이 파일은 {size} KiB입니다. 로고는 최대 100 KiB까지 가능합니다.", "このファイルは {size} KiB です。ロゴは 100 KiB までです。"},
}
