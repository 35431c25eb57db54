{{/* Names, labels and the values every template shares. */}}

{{- define "dejaq.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name; components append -etcd, -redis, -headless (so 52 at most). */}}
{{- define "dejaq.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "dejaq.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; call with (dict "ctx" $ "component" "broker"). */}}
{{- define "dejaq.labels" -}}
helm.sh/chart: {{ include "dejaq.chart" .ctx }}
{{ include "dejaq.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: dejaq
{{- end -}}

{{- define "dejaq.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dejaq.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "dejaq.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "dejaq.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "dejaq.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The Secret holding the storage URL, and its key. */}}
{{- define "dejaq.storageSecret" -}}
{{- default (printf "%s-storage" (include "dejaq.fullname" .)) .Values.storage.existingSecret -}}
{{- end -}}
{{- define "dejaq.storageSecretKey" -}}
{{- if .Values.storage.existingSecret }}{{ .Values.storage.existingSecretKey }}{{ else }}url{{ end -}}
{{- end -}}

{{/* With storage.passwordSecret: the URL with $(STORAGE_PASSWORD) as its password,
which the kubelet fills in from the Secret (postgresql://dejaq@db/d becomes
postgresql://dejaq:$(STORAGE_PASSWORD)@db/d, redis://r:6379/0 redis://:$(...)@r:6379/0,
redis+sentinel://s1:26379,s2:26379/m/0 redis+sentinel://:$(...)@s1:26379,s2:26379/m/0). */}}
{{- define "dejaq.storageUrlWithPassword" -}}
{{- regexReplaceAll "^([a-z+]+://)(?:([^:@/]*)@)?" .Values.storage.url "${1}${2}:$$(STORAGE_PASSWORD)@" -}}
{{- end -}}

{{/* The storage URL the chart knows (empty with storage.existingSecret). */}}
{{- define "dejaq.storageUrl" -}}
{{- if .Values.redis.enabled -}}
{{- printf "redis://%s-redis:6379/0" (include "dejaq.fullname" .) -}}
{{- else -}}
{{- .Values.storage.url -}}
{{- end -}}
{{- end -}}

{{- define "dejaq.etcdHeadless" -}}
{{- printf "%s-etcd-headless" (include "dejaq.fullname" .) -}}
{{- end -}}

{{/* One member's DNS name: (dict "ctx" $ "i" 0). */}}
{{- define "dejaq.etcdMemberHost" -}}
{{- printf "%s-etcd-%d.%s.%s.svc.%s" (include "dejaq.fullname" .ctx) (int .i) (include "dejaq.etcdHeadless" .ctx) .ctx.Release.Namespace .ctx.Values.clusterDomain -}}
{{- end -}}

{{/* DEJAQ_ETCD: the bundled members' client URLs, or the external endpoints; empty = none. */}}
{{- define "dejaq.etcdEndpoints" -}}
{{- if .Values.etcd.enabled -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.etcd.replicaCount) -}}
{{- $urls = append $urls (printf "%s://%s:2379" (include "dejaq.etcdScheme" $) (include "dejaq.etcdMemberHost" (dict "ctx" $ "i" $i))) -}}
{{- end -}}
{{- join "," $urls -}}
{{- else -}}
{{- join "," .Values.etcd.externalEndpoints -}}
{{- end -}}
{{- end -}}

{{/* etcd's --initial-cluster: name=peer URL for every member. */}}
{{- define "dejaq.etcdInitialCluster" -}}
{{- $members := list -}}
{{- range $i := until (int .Values.etcd.replicaCount) -}}
{{- $members = append $members (printf "%s-etcd-%d=%s://%s:2380" (include "dejaq.fullname" $) $i (include "dejaq.etcdScheme" $) (include "dejaq.etcdMemberHost" (dict "ctx" $ "i" $i))) -}}
{{- end -}}
{{- join "," $members -}}
{{- end -}}

{{/* The bundled etcd's scheme, for clients and peers. */}}
{{- define "dejaq.etcdScheme" -}}
{{- if .Values.etcd.tls.enabled }}https{{ else }}http{{ end -}}
{{- end -}}

{{/* The broker's flags for its own TLS and auth (the rest of its settings are
DEJAQ_* variables): each appears only when its value asks for it. */}}
{{- define "dejaq.brokerArgs" -}}
{{- $args := list -}}
{{- if .Values.broker.tls.enabled -}}
{{- $args = concat $args (list "--tls-cert=/etc/dejaq/tls/tls.crt" "--tls-key=/etc/dejaq/tls/tls.key") -}}
{{- if .Values.broker.tls.clientCA -}}
{{- $args = append $args "--tls-client-ca=/etc/dejaq/tls/ca.crt" -}}
{{- end -}}
{{- end -}}
{{- if .Values.broker.auth.existingSecret -}}
{{- $args = append $args (printf "--auth=/etc/dejaq/auth/%s" .Values.broker.auth.existingSecretKey) -}}
{{- end -}}
{{- if .Values.broker.auth.insecureAllowAnonymous -}}
{{- $args = append $args "--insecure-allow-anonymous" -}}
{{- end -}}
{{- if .Values.broker.bridges.existingSecret -}}
{{- $args = append $args (printf "--bridges=/etc/dejaq/bridges/%s" .Values.broker.bridges.existingSecretKey) -}}
{{- end -}}
{{- toJson $args -}}
{{- end -}}

{{/* Secrets mounted into the broker: (volume name, Secret, mount path, items or nil). */}}
{{- define "dejaq.brokerSecretVolumes" -}}
{{- $v := list -}}
{{- if .Values.broker.tls.enabled -}}
{{- $v = append $v (dict "name" "tls" "secret" .Values.broker.tls.existingSecret "path" "/etc/dejaq/tls") -}}
{{- end -}}
{{- with .Values.broker.auth.existingSecret -}}
{{- $v = append $v (dict "name" "auth" "secret" . "path" "/etc/dejaq/auth") -}}
{{- end -}}
{{- with .Values.broker.bridges.existingSecret -}}
{{- $v = append $v (dict "name" "bridges" "secret" . "path" "/etc/dejaq/bridges") -}}
{{- end -}}
{{- with .Values.storage.tls.existingSecret -}}
{{- $v = append $v (dict "name" "storage-tls" "secret" . "path" "/etc/dejaq/storage-tls") -}}
{{- end -}}
{{- if .Values.etcd.client.tls.enabled -}}
{{- $v = append $v (dict "name" "etcd-tls" "secret" .Values.etcd.client.tls.existingSecret "path" "/etc/dejaq/etcd-tls") -}}
{{- end -}}
{{- if .Values.etcd.client.auth.enabled -}}
{{- $items := list (dict "key" .Values.etcd.client.auth.passwordKey "path" "password") -}}
{{- $v = append $v (dict "name" "etcd-auth" "secret" .Values.etcd.client.auth.existingSecret "path" "/etc/dejaq/etcd-auth" "items" $items) -}}
{{- end -}}
{{- if and .Values.metrics.enabled .Values.metrics.tls.enabled -}}
{{- $v = append $v (dict "name" "metrics-tls" "secret" .Values.metrics.tls.existingSecret "path" "/etc/dejaq/metrics-tls") -}}
{{- end -}}
{{- toJson $v -}}
{{- end -}}

{{- define "dejaq.terminationGracePeriodSeconds" -}}
{{- add .Values.broker.preStopSeconds .Values.broker.gracefulStopSeconds .Values.broker.stopMarginSeconds -}}
{{- end -}}
