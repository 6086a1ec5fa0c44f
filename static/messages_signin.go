package static

// messagesSignIn holds the dashboard's sign-in strings that say where the admin token is,
// each as {English, Korean, Japanese}. builtinTables merges it into the three tables; the
// parity test checks it like the others.
var messagesSignIn = map[string][3]string{
	"admin_token_where": {"Where is the token?", "토큰은 어디에 있나요?", "トークンはどこにありますか?"},
	"admin_token_where_env": {
		"If the server was started with WR_ADMIN_TOKEN, it is that value.",
		"서버를 WR_ADMIN_TOKEN과 함께 시작했다면 그 값입니다.",
		"サーバーを WR_ADMIN_TOKEN 付きで起動した場合は、その値です。"},
	"admin_token_where_terminal": {
		"Otherwise the server made one: a sign-in link that holds it was printed on the terminal where the server started.",
		"그렇지 않으면 서버가 직접 만든 토큰입니다. 서버를 시작한 터미널에 이 토큰이 들어 있는 로그인 링크가 출력되었습니다.",
		"そうでなければ、サーバーが自分で作ったトークンです。サーバーを起動したターミナルに、このトークン入りのサインインリンクが表示されています。"},
	"admin_token_where_file": {
		"The server also keeps it in the file waitroom-admin-token-default (waitroom-admin-token-<WR_INSTANCE_ID> when that is set) in its data directory: WR_DATA_DIR, by default the local PostgreSQL's data directory in a per-user cache directory. The start log names the file.",
		"서버는 이 토큰을 데이터 디렉터리의 waitroom-admin-token-default 파일(WR_INSTANCE_ID를 설정했다면 waitroom-admin-token-<WR_INSTANCE_ID>)에도 보관합니다. 데이터 디렉터리는 WR_DATA_DIR이며, 기본값은 사용자별 캐시 디렉터리 안의 로컬 PostgreSQL 데이터 디렉터리입니다. 시작 로그에 파일 경로가 나옵니다.",
		"サーバーはこのトークンを、データディレクトリのファイル waitroom-admin-token-default(WR_INSTANCE_ID を設定した場合は waitroom-admin-token-<WR_INSTANCE_ID>)にも保存しています。データディレクトリは WR_DATA_DIR で、既定ではユーザーごとのキャッシュディレクトリにあるローカル PostgreSQL のデータディレクトリです。起動ログにファイルのパスが出ます。"},
}
