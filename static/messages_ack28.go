package static

// messagesAck28 holds the dashboard's strings for an admission held until a Redis replica
// acknowledges it (docs/OPERATIONS.md "Failover"), each as {English, Korean, Japanese}. builtinTables
// merges it into the three tables; the parity test checks it like the others.
var messagesAck28 = map[string][3]string{
	"admin_admission_held": {"Admission held", "입장 보류", "入場保留"},
	"admin_admission_held_title": {
		"Admission is held: the Redis replica has not confirmed the last admissions yet, so nobody is told a token until it does (a failover now could lose them). It resumes by itself.",
		"입장이 보류되었습니다. Redis 복제본이 마지막 입장을 아직 확인하지 않아, 확인될 때까지 누구에게도 토큰을 알리지 않습니다(지금 장애 조치가 일어나면 잃을 수 있기 때문입니다). 자동으로 재개됩니다.",
		"入場を保留しています。Redis のレプリカが直近の入場をまだ確認していないため、確認されるまで誰にもトークンを伝えません(今フェイルオーバーが起きると失われる可能性があるため)。自動的に再開します。"},
}
