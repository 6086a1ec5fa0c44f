package static

// messagesPlaces27 holds the dashboard's strings for the per-address share of max_active
// (a place counts until its token ends), each as {English, Korean, Japanese}.
var messagesPlaces27 = map[string][3]string{
	"admin_share_per_ip": {"Share of max active per address (0 = off)", "주소당 최대 동시 입장 비율 (0 = 끔)", "アドレスごとの同時入場上限の割合(0 = オフ)"},
	"admin_share_per_ip_hint": {
		"Where max active is set, one address holds at most this share of it (at least one place). Raise it, or set 0, for addresses many buyers share: offices, carrier networks.",
		"최대 동시 입장 수가 설정된 경우 한 주소는 그중 이 비율까지만 자리를 가집니다(최소 1자리). 사무실이나 통신사 네트워크처럼 여러 구매자가 함께 쓰는 주소라면 값을 올리거나 0으로 두세요.",
		"同時入場の上限が設定されているとき、1つのアドレスが持てる順番はその割合まで(最低1つ)です。オフィスや携帯キャリアの回線など、多くの購入者が共有するアドレスでは値を上げるか0にしてください。"},
}
