{{- define "kubenest-agent.name" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kubenest-agent.labels" -}}
app.kubernetes.io/name: kubenest-agent
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "kubenest-agent.tokenSecret" -}}
{{- if .Values.existingSecret -}}{{ .Values.existingSecret }}{{- else -}}{{ include "kubenest-agent.name" . }}-token{{- end -}}
{{- end -}}

{{/* The agent's image: the tag defaults to the chart's appVersion. */}}
{{- define "kubenest-agent.tag" -}}
{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{/* The builder image: builders.image, else the agent image's sibling `builder` at the same
     tag (a chart `make release` published names the registry it pushed both to). */}}
{{- define "kubenest-agent.builderImage" -}}
{{- if .Values.builders.image -}}
{{ .Values.builders.image }}
{{- else -}}
{{ dir .Values.image.repository }}/builder:{{ include "kubenest-agent.tag" . }}
{{- end -}}
{{- end -}}

{{/* Where and at which priority the agent's pods run, and the Secrets they pull with. */}}
{{- define "kubenest-agent.scheduling" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- range . }}
  - name: {{ . }}
  {{- end }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
