package static

// messagesTokens27 holds the dashboard's strings for revoking a token signing key, each as
// {English, Korean, Japanese}. builtinTables merges it into the
// three tables; the parity test checks it like the others.
var messagesTokens27 = map[string][3]string{
	"admin_key_action":       {"Action", "작업", "操作"},
	"admin_key_revoke":       {"Revoke", "폐기", "失効"},
	"admin_key_revoke_named": {"Revoke the signing key {kid}", "서명 키 {kid} 폐기", "署名鍵 {kid} を失効させる"},
	"admin_confirm_revoke_key": {
		"Revoke the signing key {kid}? Every admission token it signed is refused from now on — at once here, and by every other instance of the waiting room within its key refresh (30 seconds by default) — so buyers who hold one must queue again. The key also leaves the published key set; shops that verify tokens offline keep accepting its tokens until their cached key set expires. While bare tokens are accepted (WR_ACCEPT_BARE_TOKENS), a token's bare ID still passes until it lapses: turn that off after a key leak.",
		"서명 키 {kid}를 폐기할까요? 이 키로 서명된 모든 입장 토큰이 지금부터 거부됩니다. 이 서버에서는 즉시, 대기실의 다른 인스턴스에서는 키를 다시 읽는 주기(기본 30초) 안에 거부되므로, 이 토큰을 가진 구매자는 다시 줄을 서야 합니다. 키는 공개 키 목록에서도 빠지며, 토큰을 오프라인으로 검증하는 쇼핑몰은 캐시된 키 목록이 만료될 때까지 이 키의 토큰을 계속 받아들입니다. 서명 없는 토큰을 받는 동안(WR_ACCEPT_BARE_TOKENS)은 토큰의 ID만으로 만료 전까지 통과하므로, 키가 유출되었다면 이 설정을 끄세요.",
		"署名鍵 {kid} を失効させますか?この鍵で署名されたすべての入場トークンが今から拒否されます。このサーバーでは直ちに、待合室の他のインスタンスでは鍵の再読み込みの間隔(既定30秒)以内に拒否されるため、そのトークンを持つ購入者はもう一度並ぶ必要があります。鍵は公開鍵の一覧からも外れます。トークンをオフラインで検証するショップは、キャッシュした鍵の一覧が期限切れになるまでこの鍵のトークンを受け入れ続けます。署名なしトークンを受け付けている間(WR_ACCEPT_BARE_TOKENS)は、トークンのIDだけで期限まで通るため、鍵が漏れた場合はこの設定をオフにしてください。"},
	"admin_key_revoked": {"Key revoked.", "키를 폐기했습니다.", "鍵を失効させました。"},
}
